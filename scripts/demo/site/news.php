<?php
// A page the application declares cacheable for 30 s: the moderate gear
// caches it by the HTTP rules, the light gear does not.
require __DIR__ . '/work.php';

header('Cache-Control: public, max-age=30');
$digest = demo_work();
demo_page('news', "<p>Today's news, fresh for 30 seconds.</p><p>work digest {$digest}</p>");
