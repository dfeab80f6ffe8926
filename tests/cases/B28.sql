CREATE DATABASE shard_w1; CREATE DATABASE shard_w2; CREATE DATABASE shard_w3; CREATE DATABASE shard_w4;
CREATE TABLE shard_w1.ev (id INT PRIMARY KEY, payload CHAR(32), n INT NOT NULL DEFAULT 0);
CREATE TABLE shard_w2.ev LIKE shard_w1.ev; CREATE TABLE shard_w3.ev LIKE shard_w1.ev; CREATE TABLE shard_w4.ev LIKE shard_w1.ev;
DELIMITER //
CREATE PROCEDURE shard_w1.load_all(IN cnt INT)
BEGIN
  DECLARE i INT DEFAULT 1;
  WHILE i <= cnt DO
    INSERT INTO shard_w1.ev VALUES (i, MD5(CONCAT('w1-', i)), 0);
    INSERT INTO shard_w2.ev VALUES (i, MD5(CONCAT('w2-', i)), 0);
    UPDATE shard_w1.ev SET n = n + 1 WHERE id = 1;               -- hot row
    IF i MOD 10 = 0 THEN                                          -- cross-shard txn
      START TRANSACTION;
      INSERT INTO shard_w3.ev VALUES (i, MD5(CONCAT('w3-', i)), i);
      INSERT INTO shard_w4.ev VALUES (i, MD5(CONCAT('w4-', i)), i);
      UPDATE shard_w2.ev SET n = n + 1 WHERE id = i;
      COMMIT;
    END IF;
    IF i MOD 100 = 0 THEN DELETE FROM shard_w2.ev WHERE id = i - 50; END IF;
    SET i = i + 1;
  END WHILE;
END//
DELIMITER ;
CALL shard_w1.load_all(2000);
