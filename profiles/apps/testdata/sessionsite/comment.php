<?php
// The comment form of an article: its token is the visitor's session's.
require __DIR__ . '/common.php';
check_csrf();
$id = (int) ($_GET['id'] ?? 1);
if ($_SERVER['REQUEST_METHOD'] === 'POST') {
    $comments = read_json('comments-' . $id . '.json');
    $comments[] = (string) ($_POST['comment'] ?? '');
    write_json('comments-' . $id . '.json', $comments);
    redirect('/article.php?id=' . $id);
}
render('Comment on article ' . $id, '<form method="post" action="/comment.php?id=' . $id . '" id="comment-form">'
    . csrf_field() . '<textarea name="comment"></textarea> <button>Post</button></form>');
