<?php
// A page that starts to carry the session's token when the file
// "changing-token" exists in SITE_DATA (a theme update that adds a form).
require __DIR__ . '/common.php';
$form = file_exists(data_file('changing-token'))
    ? '<form method="post" action="/comment.php?id=9" id="changing-form">' . csrf_field() . '</form>' : '';
render('Changing', '<p>A page that changes.</p>' . $form);
