<?php
// php_client.php - PHP's curl extension (which PHP loads with RTLD_DEEPBIND)
// fetching a URL with a 2 s connect and a 3 s total timeout; prints
// "RESULT curl-<curl errno> <ms>". usage: php php_client.php URL
$c = curl_init($argv[1]);
curl_setopt($c, CURLOPT_RETURNTRANSFER, true);
curl_setopt($c, CURLOPT_CONNECTTIMEOUT_MS, 2000);
curl_setopt($c, CURLOPT_TIMEOUT_MS, 3000);
$t = microtime(true);
curl_exec($c);
printf("RESULT curl-%d %d\n", curl_errno($c), (microtime(true) - $t) * 1000);
