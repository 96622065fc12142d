<?php
// An article: the same for every visitor who is not signed in, with the
// comments posted so far.
require __DIR__ . '/common.php';
$id = (int) ($_GET['id'] ?? 1);
$list = '';
foreach (read_json('comments-' . $id . '.json') as $c) {
    $list .= '<li class="comment">' . h($c) . '</li>';
}
render('Article ' . $id, '<p>The text of article ' . $id . ', the same for everyone.</p>'
    . '<ul id="comments">' . $list . '</ul><p><a href="/comment.php?id=' . $id . '">Comment</a></p>');
