package consumer

// Credentials are RocketMQ ACL credentials (the broker's aclEnable / plain_acl.yml accounts): every request
// the client sends is signed with SecretKey and names AccessKey. The zero value means no ACL. String and
// GoString never show SecretKey, so a Credentials value can be logged or printed safely.
type Credentials struct {
	// AccessKey names the account, e.g. "rmqguard". Empty means no ACL.
	AccessKey string
	// SecretKey signs the requests (HMAC-SHA1, the client's own signing). Never logged.
	SecretKey string
}

// String renders "none" or "access key <AccessKey>, secret key set|missing"; the secret is never shown.
func (c Credentials) String() string {
	if c == (Credentials{}) {
		return "none"
	}
	secret := "set"
	if c.SecretKey == "" {
		secret = "missing"
	}
	return "access key " + c.AccessKey + ", secret key " + secret
}

// GoString is String, so %#v does not print the secret either.
func (c Credentials) GoString() string { return c.String() }
