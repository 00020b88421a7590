-- Wakes `coexist batch daemon` when work arrives: every INSERT into the
-- queue, by any producer (coexist enqueue, an application, psql), sends
-- NOTIFY coexist_queue with the job's name as payload, once per job and
-- statement. Notifications are delivered at commit, so a daemon never wakes
-- for items it cannot see yet, and a rolled-back enqueue wakes nobody.
-- Statement-level with a transition table: one notification for a bulk
-- enqueue of a million items, not a million. UPDATEs (queue retry --dead,
-- the batch's own bookkeeping) do not notify; the daemon's poll finds them.
CREATE FUNCTION coexist.notify_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('coexist_queue', j.job) FROM (SELECT DISTINCT job FROM new_items) AS j;
  RETURN NULL;
END
$$;

CREATE TRIGGER queue_notify_enqueue AFTER INSERT ON coexist.queue
  REFERENCING NEW TABLE AS new_items
  FOR EACH STATEMENT EXECUTE FUNCTION coexist.notify_enqueue();
