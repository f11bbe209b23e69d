-- A target_value of 1E400 in a request body was read as Infinity and stored; every later list of
-- the customer's objectives then answered null where a number is documented. The API now refuses
-- such numbers (400 too_large); a target stored before is clamped to the nearest finite value, the
-- closest to what was asked, and the column holds only finite values from now on.
UPDATE objectives SET target_value = CASE WHEN target_value > 0 THEN 1.7976931348623157e308
                                          ELSE -1.7976931348623157e308 END
WHERE target_value IN ('Infinity'::float8, '-Infinity'::float8);
UPDATE objectives SET target_value = 0 WHERE target_value = 'NaN'::float8;
ALTER TABLE objectives ADD CONSTRAINT objectives_target_finite
  CHECK (target_value BETWEEN -1.7976931348623157e308 AND 1.7976931348623157e308);
