-- The ledger of config/examples/ledger.yaml: accounts keyed by text, and
-- transfers between two of them posted by the batch. Posting moves the
-- amount and writes both entries, all or nothing; money is never made or lost.
CREATE SCHEMA ledger;
CREATE TABLE ledger.accounts (
  id      text   PRIMARY KEY,
  balance bigint NOT NULL CHECK (balance >= 0),
  version bigint NOT NULL DEFAULT 0
);
CREATE TABLE ledger.transfers (
  id           bigint      PRIMARY KEY,
  from_account text        NOT NULL REFERENCES ledger.accounts,
  to_account   text        NOT NULL REFERENCES ledger.accounts,
  amount       bigint      NOT NULL CHECK (amount > 0),
  posted_at    timestamptz,
  CHECK (from_account <> to_account)
);
CREATE TABLE ledger.entries (
  transfer_id bigint NOT NULL,
  account     text   NOT NULL REFERENCES ledger.accounts,
  amount      bigint NOT NULL,
  PRIMARY KEY (transfer_id, account)
);
