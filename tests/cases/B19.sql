CREATE DATABASE shard_a; CREATE DATABASE shard_b;
CREATE TABLE shard_a.wallet (id INT PRIMARY KEY, bal INT NOT NULL);
CREATE TABLE shard_b.wallet (id INT PRIMARY KEY, bal INT NOT NULL);
INSERT INTO shard_a.wallet VALUES (1, 100); INSERT INTO shard_b.wallet VALUES (1, 100);
START TRANSACTION;
  UPDATE shard_a.wallet SET bal = bal - 30 WHERE id = 1;
  UPDATE shard_b.wallet SET bal = bal + 30 WHERE id = 1;
COMMIT;
UPDATE shard_a.wallet SET bal = bal * 2 WHERE id = 1;   -- depends on the cross-shard txn
UPDATE shard_b.wallet SET bal = bal - 1 WHERE id = 1;
