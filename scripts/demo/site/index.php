<?php
// The home page: CPU work on every request. Anonymous visitors get no session;
// a visitor with a session cookie gets session_start() and a personal greeting.
// Both carry PHP's default no-cache headers, as most PHP applications send:
// only gearshift's heavy gear caches this page.
require __DIR__ . '/work.php';

$user = null;
if (isset($_COOKIE[session_name()])) {
    // session.cache_limiter=nocache (PHP's default) sends Expires 1981,
    // Cache-Control: no-store, no-cache, must-revalidate and Pragma: no-cache.
    session_start();
    $user = $_SESSION['user'] ?? null;
    session_write_close();
} else {
    header('Expires: Thu, 19 Nov 1981 08:52:00 GMT');
    header('Cache-Control: no-store, no-cache, must-revalidate');
    header('Pragma: no-cache');
}

$digest = demo_work();
if ($user !== null) {
    $body = '<p class="user">Hello, <b>' . htmlspecialchars($user) . '</b>. This page is yours alone.</p>';
} else {
    $body = '<p>Hello, anonymous visitor. <a href="/login.php">Log in</a> to get a session.</p>';
}
demo_page('gearshift demo', $body . "<p>work digest {$digest}</p>");
