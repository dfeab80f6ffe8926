SET GLOBAL log_bin_compress = ON; SET GLOBAL log_bin_compress_min_len = 10;
CREATE DATABASE rt_comp; USE rt_comp;
CREATE TABLE cz (id INT PRIMARY KEY, b INT, pad VARCHAR(500));
INSERT INTO cz VALUES (1, 100, REPEAT('p', 400)), (2, 200, 'short');
UPDATE cz SET b = 888888 WHERE id = 1;
DELETE FROM cz WHERE id = 2;
INSERT INTO cz VALUES (3, 3, REPEAT('q', 300));
SET GLOBAL log_bin_compress = OFF;
