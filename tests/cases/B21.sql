CREATE DATABASE shard_a; CREATE DATABASE shard_b;     -- (reuse from B19 if present)
CREATE TABLE shard_a.acct (id INT PRIMARY KEY, bal INT);
INSERT INTO shard_a.acct VALUES (1, 10), (2, 20);
ALTER TABLE shard_a.acct ADD COLUMN cur CHAR(3) NOT NULL DEFAULT 'EUR' AFTER id;
INSERT INTO shard_a.acct (id, cur, bal) VALUES (3, 'USD', 30);
CREATE TABLE shard_a.acct_copy SELECT id, bal FROM shard_a.acct WHERE bal >= 20;
RENAME TABLE shard_a.acct_copy TO shard_b.acct_copy;
INSERT INTO shard_b.acct_copy VALUES (4, 40);
ALTER TABLE shard_a.acct DROP COLUMN bal;
UPDATE shard_a.acct SET cur = 'GBP' WHERE id = 1;
