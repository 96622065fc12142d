<?php
require __DIR__ . '/common.php';
check_csrf();
$error = '';
if ($_SERVER['REQUEST_METHOD'] === 'POST') {
    $users = read_json('users.json');
    $name = (string)($_POST['name'] ?? '');
    $pass = (string)($_POST['password'] ?? '');
    if (isset($users[$name]) && hash_equals($users[$name], $pass)) {
        session_regenerate_id(true);
        $_SESSION['user'] = $name;
        $_SESSION['csrf'] = bin2hex(random_bytes(16));
        redirect('/account.php');
    }
    http_response_code(403);
    $error = '<p class="error">Wrong name or password.</p>';
}
render('Sign in', $error . '<form method="post" action="/login.php" id="login">' . csrf_field()
    . '<input name="name"> <input type="password" name="password"> <button>Sign in</button></form>');
