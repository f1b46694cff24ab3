-- Reverse of 0018_inline_publish: the enqueue that publishes in its own statement goes; the
-- other definitions of functions/enqueue.sql are the ones 0017 had.
DROP FUNCTION awa.enqueue_job_alone(text, text, smallint, jsonb, integer, timestamptz, jsonb,
                                    text[]);
