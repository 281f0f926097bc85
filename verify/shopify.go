package verify

import "crypto/sha256"

// shopifyHeader carries Shopify's signature: base64 HMAC-SHA256 of the body.
const shopifyHeader = "X-Shopify-Hmac-Sha256"

func newShopify(secrets [][]byte) *signature {
	return &signature{header: shopifyHeader, hash: sha256.New, encoding: Base64, secrets: secrets}
}
