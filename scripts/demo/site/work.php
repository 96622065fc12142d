<?php
// Shared by the demo pages: a fixed amount of CPU work standing in for what a
// CMS does per page (templates, queries, plugins). About 20-50 ms on one core
// of a small server; DEMO_WORK (SetEnv in the Apache config) scales it.
function demo_work(): string
{
    $rounds = (int) (getenv('DEMO_WORK') ?: 120000);
    $h = 'gearshift';
    for ($i = 0; $i < $rounds; $i++) {
        $h = md5($h . $i);
    }
    return substr($h, 0, 12);
}

function demo_page(string $title, string $body): void
{
    $served = date('H:i:s');
    $pid = getmypid();
    echo <<<HTML
<!doctype html>
<html><head><meta charset="utf-8"><title>{$title}</title>
<link rel="stylesheet" href="/style.css"></head>
<body><img src="/logo.png" alt="" width="32" height="32">
<h1>{$title}</h1>
{$body}
<p class="meta">rendered by PHP at {$served} (pid {$pid})</p>
<nav><a href="/">home</a> · <a href="/news.php">news</a> · <a href="/login.php">log in</a> · <a href="/logout.php">log out</a></nav>
</body></html>

HTML;
}
