CREATE DATABASE rt_json; USE rt_json;
CREATE TABLE j (id INT PRIMARY KEY, doc JSON, doc2 JSON);
INSERT INTO j VALUES
 (1, '{"a":true,"c":"d","ab":"t\\"q","bc":["x","y"],"n":18446744073709551615,"f":-1.5e-7}', '[]'),
 (2, '{"k":"\\u00e9\\ud83d\\ude00","nested":{"deep":[1,{"x":null}]}}', NULL);
UPDATE j SET doc = JSON_SET(doc, '$.c', 'e', '$.new', 42) WHERE id = 1;
