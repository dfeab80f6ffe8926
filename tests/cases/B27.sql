CREATE DATABASE shard_l1; CREATE DATABASE shard_l2;
CREATE TABLE shard_l1.big (id INT PRIMARY KEY, v BIGINT); CREATE TABLE shard_l2.big (id INT PRIMARY KEY, v BIGINT);
USE shard_l1;
START TRANSACTION;
  INSERT INTO shard_l1.big SELECT seq, seq FROM seq_1_to_50000;
  INSERT INTO shard_l2.big SELECT seq, seq * 2 FROM seq_1_to_50000;
  UPDATE shard_l1.big SET v = v + 1;
COMMIT;
