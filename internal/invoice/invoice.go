// Package invoice is a typical event and its JSON Schema, shared by the shaping bench and the validation
// benchmarks so that both measure the same work.
package invoice

import "bytes"

// Type is the event type of Body, read at its "type".
const Type = "invoice.paid"

// Schema is what a tenant would write for an invoice event: typed properties, a required list, nested
// objects, enums and patterns, so that validation walks a realistic tree rather than one field.
const Schema = `{
  "type": "object",
  "required": ["id", "type", "created", "amount", "currency", "status", "customer"],
  "properties": {
    "id": {"type": "string", "pattern": "^evt_[A-Za-z0-9]{8,64}$"},
    "type": {"type": "string", "const": "invoice.paid"},
    "created": {"type": "integer", "minimum": 0},
    "livemode": {"type": "boolean"},
    "amount": {"type": "integer", "minimum": 0},
    "currency": {"type": "string", "enum": ["eur", "usd", "gbp", "chf", "jpy"]},
    "status": {"type": "string", "enum": ["draft", "open", "paid", "void"]},
    "customer": {
      "type": "object",
      "required": ["id", "email"],
      "additionalProperties": false,
      "properties": {
        "id": {"type": "string", "minLength": 1},
        "email": {"type": "string", "format": "email", "maxLength": 254},
        "name": {"type": "string", "maxLength": 200},
        "address": {
          "type": "object",
          "properties": {
            "line1": {"type": "string"},
            "city": {"type": "string"},
            "postal_code": {"type": "string", "maxLength": 16},
            "country": {"type": "string", "pattern": "^[A-Z]{2}$"}
          }
        }
      }
    },
    "lines": {
      "type": "array",
      "minItems": 1,
      "maxItems": 100,
      "items": {
        "type": "object",
        "required": ["sku", "quantity", "unit_amount"],
        "properties": {
          "sku": {"type": "string"},
          "quantity": {"type": "integer", "minimum": 1},
          "unit_amount": {"type": "integer", "minimum": 0},
          "description": {"type": "string", "maxLength": 500}
        }
      }
    },
    "metadata": {"type": "object", "maxProperties": 50, "additionalProperties": {"type": "string", "maxLength": 500}},
    "description": {"type": "string", "maxLength": 2000}
  }
}`

// Body is a 1 KiB invoice event that follows Schema.
func Body() []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":"evt_1NvXkq2eZvKYlo2C8rT4bQwM","type":"invoice.paid","created":1733500000,"livemode":false,` +
		`"amount":12900,"currency":"eur","status":"paid",` +
		`"customer":{"id":"cus_P3kq9sLm2xYz","email":"billing@example.com","name":"Example Trading GmbH",` +
		`"address":{"line1":"Hauptstrasse 12","city":"Berlin","postal_code":"10115","country":"DE"}},` +
		`"lines":[{"sku":"plan-pro-monthly","quantity":1,"unit_amount":9900,"description":"Pro plan, monthly"},` +
		`{"sku":"seat-extra","quantity":3,"unit_amount":1000,"description":"Extra seats"}],` +
		`"metadata":{"order_id":"ord_84512","channel":"web","region":"eu-central"},"description":"`)
	for b.Len() < 1024-2 {
		b.WriteString("x")
	}
	b.WriteString(`"}`)
	return b.Bytes()
}

// Invalid is Body with a currency outside the schema's enum: what an intake that validates answers 422, at
// /currency.
func Invalid() []byte {
	return bytes.Replace(Body(), []byte(`"currency":"eur"`), []byte(`"currency":"eux"`), 1)
}
