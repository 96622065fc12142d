<?php
// A page whose session token is only in a <meta> tag, for the site's
// scripts to send with their requests.
require __DIR__ . '/common.php';
render('News', '<p>The news, the same for everyone.</p>',
    '<meta name="csrf-token" content="' . h($_SESSION['csrf']) . '">');
