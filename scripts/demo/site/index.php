<?php
// The home page: CPU work on every request. Anonymous visitors get no session
// and the headers of a CMS page that asks to be revalidated every time
// (no-cache, max-age=0 and a 1981 Expires, as Drupal or a framework sends):
// only gearshift's heavy gear, which overrides freshness, caches it. A
// visitor with a session cookie gets session_start() and a personal
// greeting, with PHP's session headers (no-store: never stored).
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
    header('Cache-Control: no-cache, must-revalidate, max-age=0');
    header('Pragma: no-cache');
}

$digest = demo_work();
if ($user !== null) {
    $body = '<p class="user">Hello, <b>' . htmlspecialchars($user) . '</b>. This page is yours alone.</p>';
} else {
    $body = '<p>Hello, anonymous visitor. <a href="/login.php">Log in</a> to get a session.</p>';
}
demo_page('gearshift demo', $body . "<p>work digest {$digest}</p>");
