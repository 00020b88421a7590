-- The shop of config/examples/order-settlement.yaml: products keyed by
-- uuid, orders of several lines each. Settling an order takes its lines'
-- quantities off the products' stock and marks it settled, all or nothing.
CREATE SCHEMA shop;
CREATE TABLE shop.products (
  id      uuid    PRIMARY KEY,
  name    text    NOT NULL,
  stock   integer NOT NULL CHECK (stock >= 0),
  version bigint  NOT NULL DEFAULT 0
);
CREATE TABLE shop.orders (
  id         uuid        PRIMARY KEY,
  status     text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'settled')),
  settled_at timestamptz,
  version    bigint      NOT NULL DEFAULT 0
);
CREATE TABLE shop.order_lines (
  order_id   uuid    NOT NULL REFERENCES shop.orders,
  product_id uuid    NOT NULL REFERENCES shop.products,
  qty        integer NOT NULL CHECK (qty > 0),
  PRIMARY KEY (order_id, product_id)
);
