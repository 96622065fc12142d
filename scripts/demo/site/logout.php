<?php
// Ends the session and removes the cookie.
require __DIR__ . '/work.php';

if (isset($_COOKIE[session_name()])) {
    session_start();
    session_destroy();
    setcookie(session_name(), '', time() - 3600, '/');
}
demo_page('logged out', '<p>Bye.</p>');
