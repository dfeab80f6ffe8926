CREATE DATABASE rt_enum; USE rt_enum; SET SESSION sql_mode = '';
CREATE TABLE e (
  job_id VARCHAR(36) NOT NULL,
  kind ENUM('RFS_WEBHOOKS','ESS') NOT NULL,
  size ENUM('x-small','small','medium','large','x-large') DEFAULT NULL,
  flags SET('a','b','c','d','e','f','g','h','i') DEFAULT NULL,
  note VARCHAR(10),
  PRIMARY KEY (job_id, kind));
INSERT INTO e VALUES ('j1','ESS','medium','a,c,i','x'), ('j1','RFS_WEBHOOKS','x-small','','y'),
                     ('j2','ESS','bogus','b,zz','z'), ('j3','ESS',NULL,NULL,NULL);
UPDATE e SET note = 'upd' WHERE job_id = 'j1' AND kind = 'ESS';
DELETE FROM e WHERE job_id = 'j1' AND kind = 'RFS_WEBHOOKS';
