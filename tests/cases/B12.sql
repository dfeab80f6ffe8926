CREATE DATABASE rt_min; USE rt_min;
CREATE TABLE m (id INT PRIMARY KEY, c1 INT NULL, c2 INT NULL, c3 INT NULL, c4 INT NULL, c5 INT NULL,
                c6 INT NULL, c7 INT NULL, c8 INT NULL, c9 INT NULL, c10 VARCHAR(10) NULL, c11 INT NOT NULL DEFAULT 0);
INSERT INTO m VALUES (1,1,2,3,4,5,6,7,8,9,'ten',11), (2,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0);
SET SESSION binlog_row_image = 'MINIMAL';
UPDATE m SET c9 = NULL WHERE id = 1;
UPDATE m SET c10 = 'x', c2 = 22 WHERE id = 2;
INSERT INTO m (id, c5) VALUES (3, 55);          -- row event carries only id and c5
UPDATE m SET id = 30 WHERE id = 3;
DELETE FROM m WHERE id = 2;
SET SESSION binlog_row_image = 'FULL';
CREATE DATABASE rt_noblob; USE rt_noblob;
CREATE TABLE nb (id INT PRIMARY KEY, body MEDIUMTEXT, img BLOB, cnt INT, nul TEXT NULL);
INSERT INTO nb VALUES (1, REPEAT('a', 1000), X'DEADBEEF', 0, NULL), (2, 'b', NULL, 0, 'n');
SET SESSION binlog_row_image = 'NOBLOB';
UPDATE nb SET cnt = cnt + 1;
UPDATE nb SET img = X'CAFE' WHERE id = 2;
DELETE FROM nb WHERE id = 2;
INSERT INTO nb (id, cnt) VALUES (3, 7);
SET SESSION binlog_row_image = 'FULL';
