<?php
// A small site as many are written by hand: every page starts a PHP
// session with PHP's defaults (the "nocache" limiter: Cache-Control
// no-store, no-cache; Expires in 1981; a PHPSESSID cookie), forms carry
// a CSRF token kept in the session, and what users write is kept in
// files under the directory named by SITE_DATA.
session_start();

// What rendering a page costs, for the surge benchmark: SITE_WORK_MS
// milliseconds of this process's CPU time (unset: none).
function cpu_seconds(): float
{
    $r = getrusage();
    return $r['ru_utime.tv_sec'] + $r['ru_utime.tv_usec'] / 1e6;
}
$work_ms = (int) (getenv('SITE_WORK_MS') ?: ($_SERVER['SITE_WORK_MS'] ?? 0));
if ($work_ms > 0) {
    for ($until = cpu_seconds() + $work_ms / 1000; cpu_seconds() < $until;) {
    }
}

if (empty($_SESSION['csrf'])) {
    $_SESSION['csrf'] = bin2hex(random_bytes(16));
}

function data_file(string $name): string
{
    return rtrim(getenv('SITE_DATA') ?: ($_SERVER['SITE_DATA'] ?? ''), '/') . '/' . $name;
}

function read_json(string $name): array
{
    $text = @file_get_contents(data_file($name));
    return $text === false ? [] : (json_decode($text, true) ?: []);
}

function write_json(string $name, array $value): void
{
    $tmp = data_file($name . '.' . bin2hex(random_bytes(4)));
    file_put_contents($tmp, json_encode($value));
    rename($tmp, data_file($name));
}

function user(): ?string
{
    return $_SESSION['user'] ?? null;
}

function h(string $s): string
{
    return htmlspecialchars($s, ENT_QUOTES);
}

function csrf_field(): string
{
    return '<input type="hidden" name="csrf" value="' . h($_SESSION['csrf']) . '">';
}

// check_csrf ends a POST whose token is not this session's.
function check_csrf(): void
{
    if ($_SERVER['REQUEST_METHOD'] !== 'POST') {
        return;
    }
    if (!is_string($_POST['csrf'] ?? null) || !hash_equals($_SESSION['csrf'], $_POST['csrf'])) {
        http_response_code(403);
        echo "Invalid CSRF token\n";
        exit;
    }
}

function require_user(): string
{
    $u = user();
    if ($u === null) {
        header('Location: /login.php');
        exit;
    }
    return $u;
}

function redirect(string $path): void
{
    header('Location: ' . $path, true, 303);
    exit;
}

function render(string $title, string $body, string $head = ''): void
{
    $u = user();
    $colour = $u === null ? 'blue' : (read_json('prefs-' . $u . '.json')['colour'] ?? 'blue');
    $who = $u === null
        ? '<p id="who">Not signed in. <a href="/login.php">Sign in</a></p>'
        : '<p id="who">Signed in as <b class="user">' . h($u) . '</b></p>'
          . '<form method="post" action="/logout.php" id="logout">' . csrf_field() . '<button>Sign out</button></form>';
    echo "<!doctype html>\n<html><head><title>" . h($title) . "</title>"
        . '<link rel="stylesheet" href="/style.css">' . $head . '</head>'
        . '<body class="colour-' . h($colour) . '">' . "\n"
        . $who . "\n<h1>" . h($title) . "</h1>\n" . $body . "\n</body></html>\n";
}
