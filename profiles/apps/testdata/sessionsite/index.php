<?php
require __DIR__ . '/common.php';
render('Home', '<p>The home page, the same for every visitor.</p>');
