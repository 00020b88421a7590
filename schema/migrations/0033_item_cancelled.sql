-- `coexist items cancel`: an item an operator cancelled is never run. It
-- stays a queue row in state 'cancelled' (its keys, payload and errors kept
-- for the record; `items retry` puts it back), counts neither as pending
-- nor as done, and frees the later items of its keys as a dead item does.
-- A value added to an enum cannot be used in the transaction that adds it:
-- the functions that must tell it from a pending state change in 0034.
ALTER TYPE coexist.item_state ADD VALUE 'cancelled';
