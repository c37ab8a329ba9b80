-- The audit page filters by actor ("who did this") and by action (sign-ins among
-- them, issue 29), newest first, and pages on id.
CREATE INDEX audit_log_actor_idx ON audit_log (actor, id DESC);
CREATE INDEX audit_log_action_idx ON audit_log (action, id DESC);
