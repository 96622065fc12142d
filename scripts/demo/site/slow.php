<?php
// A page that waits like one stuck on a slow database: the worker sleeps
// DEMO_SLOW_MS (SetEnv in the Apache config, default 500) and burns no CPU.
// Enough visitors fill every Apache worker while the machine's load stays
// low. The home page's anonymous headers (no-cache, max-age=0): only heavy
// caches it.
require __DIR__ . '/work.php';

header('Expires: Thu, 19 Nov 1981 08:52:00 GMT');
header('Cache-Control: no-cache, must-revalidate, max-age=0');
header('Pragma: no-cache');
$ms = (int) (getenv('DEMO_SLOW_MS') ?: 500);
usleep(max(0, $ms) * 1000);
demo_page('slow page', "<p>This page waited {$ms} ms for its database.</p>");
