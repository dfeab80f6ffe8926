-- master
CREATE DATABASE shard_r; CREATE TABLE shard_r.r (id INT PRIMARY KEY, v INT); INSERT INTO shard_r.r VALUES (1,1),(2,2);
-- slave, separate session, after replication caught up:
START TRANSACTION; SELECT * FROM shard_r.r WHERE id = 1 FOR UPDATE;   -- hold > innodb_lock_wait_timeout
-- master
UPDATE shard_r.r SET v = 10 WHERE id = 1;
UPDATE shard_r.r SET v = 20 WHERE id = 2;
-- slave session: COMMIT (release) after ~60 s
-- divergence part: on slave run  SET sql_log_bin=0; DELETE FROM shard_r.r WHERE id=2;
-- master
UPDATE shard_r.r SET v = 30 WHERE id = 2;
