<?php
require __DIR__ . '/common.php';
$u = require_user();
check_csrf();
if ($_SERVER['REQUEST_METHOD'] === 'POST') {
    write_json('note-' . $u . '.json', ['note' => (string)($_POST['note'] ?? '')]);
    redirect('/account.php');
}
$note = read_json('note-' . $u . '.json')['note'] ?? '';
render('Your account', '<p id="note">' . h($note) . '</p>'
    . '<form method="post" action="/account.php" id="note-form">' . csrf_field()
    . '<textarea name="note">' . h($note) . '</textarea><button>Save</button></form>');
