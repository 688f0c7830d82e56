package rmq

import (
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Option sets how the administration steps reach the cluster: ACL credentials and namespace.
type Option func(*access)

// access is what the Options set.
type access struct {
	credentials Credentials
	namespace   string
}

// WithCredentials signs every request with c (ACL); the zero value means no ACL.
func WithCredentials(c Credentials) Option { return func(a *access) { a.credentials = c } }

// WithNamespace puts topic and group names into namespace ns (InNamespace: "ns%T",
// "%RETRY%ns%G", "%DLQ%ns%G"); "" means none. The clients are not given the namespace option (the Go
// client's producer would prefix "%DLQ%ns%G" once more): the names are built here in full.
func WithNamespace(ns string) Option { return func(a *access) { a.namespace = ns } }

func newAccess(opts []Option) access {
	var a access
	for _, o := range opts {
		o(&a)
	}
	return a
}

// name returns resource as the broker names it in the namespace.
func (a access) name(resource string) string { return InNamespace(a.namespace, resource) }

// adminOptions returns the admin client's options: name servers and credentials.
func (a access) adminOptions(nameServers []string) []admin.AdminOption {
	opts := []admin.AdminOption{admin.WithResolver(primitive.NewPassthroughResolver(nameServers))}
	if !a.credentials.IsZero() {
		opts = append(opts, admin.WithCredentials(a.credentials.Client()))
	}
	return opts
}

// producerOptions returns a producer's options: name servers, credentials, the group in the namespace.
func (a access) producerOptions(nameServers []string, group string) []producer.Option {
	opts := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver(nameServers)),
		producer.WithGroupName(a.name(group)),
	}
	if !a.credentials.IsZero() {
		opts = append(opts, producer.WithCredentials(a.credentials.Client()))
	}
	return opts
}
