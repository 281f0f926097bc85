package verify

import "crypto/sha256"

// githubHeader carries GitHub's signature: sha256=<hex HMAC-SHA256 of the body>.
const githubHeader = "X-Hub-Signature-256"

func newGitHub(secrets [][]byte) *signature {
	return &signature{header: githubHeader, hash: sha256.New, encoding: Hex, prefix: "sha256=", secrets: secrets}
}
