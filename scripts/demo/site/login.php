<?php
// Logs the visitor in as a random demo user: starts a session, which sets
// the PHPSESSID cookie. ?user=NAME picks the name.
require __DIR__ . '/work.php';

session_start();
$name = $_GET['user'] ?? ('user-' . bin2hex(random_bytes(3)));
$name = preg_replace('/[^A-Za-z0-9_-]/', '', $name) ?: 'user';
$_SESSION['user'] = $name;
demo_page('logged in', '<p class="user">You are logged in as <b>' . htmlspecialchars($name) . '</b>.</p>');
