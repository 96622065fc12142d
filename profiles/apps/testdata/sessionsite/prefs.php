<?php
require __DIR__ . '/common.php';
$u = require_user();
check_csrf();
$colours = ['blue', 'green', 'orange'];
if ($_SERVER['REQUEST_METHOD'] === 'POST') {
    $c = (string)($_POST['colour'] ?? '');
    if (in_array($c, $colours, true)) {
        write_json('prefs-' . $u . '.json', ['colour' => $c]);
    }
    redirect('/prefs.php');
}
$current = read_json('prefs-' . $u . '.json')['colour'] ?? 'blue';
$options = '';
foreach ($colours as $c) {
    $options .= '<option value="' . $c . '"' . ($c === $current ? ' selected' : '') . '>' . $c . '</option>';
}
render('Preferences', '<form method="post" action="/prefs.php" id="prefs">' . csrf_field()
    . '<select name="colour">' . $options . '</select><button>Save</button></form>');
