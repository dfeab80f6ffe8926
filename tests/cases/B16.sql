CREATE DATABASE rt_crc; USE rt_crc;
CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(20));
INSERT INTO k VALUES (1, 'crc32-file');
SET GLOBAL binlog_checksum = 'NONE';          -- rotates; new file has no checksums
INSERT INTO k VALUES (2, 'no-checksum-file');
FLUSH BINARY LOGS;
INSERT INTO k VALUES (3, 'after-flush');
SET GLOBAL binlog_checksum = 'CRC32';         -- rotates again
INSERT INTO k VALUES (4, 'crc32-again');
UPDATE k SET v = CONCAT(v, '!') WHERE id IN (2,3);
-- then restart the master (clean shutdown writes a 23-byte STOP event; a new file starts)
