package rmq

import (
	"fmt"
	"strings"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Credentials are ACL keys: AccessKey names the account, SecretKey signs. Both empty: unsigned, no ACL.
type Credentials struct{ AccessKey, SecretKey string }

// IsZero reports whether no credentials are set.
func (c Credentials) IsZero() bool { return c.AccessKey == "" && c.SecretKey == "" }

// Client returns the credentials as the client's primitive.Credentials.
func (c Credentials) Client() primitive.Credentials {
	return primitive.Credentials{AccessKey: c.AccessKey, SecretKey: c.SecretKey}
}

// RetryTopicPrefix is the prefix of the per-group retry topic, %RETRY%<group>, on which the broker
// redelivers messages that were answered ConsumeRetryLater.
const RetryTopicPrefix = "%RETRY%"

// DLQTopicPrefix is the prefix of the per-group dead-letter topic, %DLQ%<group>.
const DLQTopicPrefix = "%DLQ%"

// DLQTopic returns the dead-letter topic of a consumer group: "%DLQ%" + group.
func DLQTopic(group string) string { return DLQTopicPrefix + group }

// RetryTopic returns the retry topic of a consumer group: "%RETRY%" + group.
func RetryTopic(group string) string { return RetryTopicPrefix + group }

// IsSystemTopic reports whether name is a per-group %RETRY% or %DLQ% topic (or group name so prefixed).
func IsSystemTopic(name string) bool {
	return strings.HasPrefix(name, RetryTopicPrefix) || strings.HasPrefix(name, DLQTopicPrefix)
}

// NamespaceSeparator joins a RocketMQ namespace and a resource name on the broker: topic T of namespace ns
// is "ns%T", group G is "ns%G", and their per-group topics are "%RETRY%ns%G" and "%DLQ%ns%G" (the broker
// builds those from the namespaced group name, "%DLQ%" + "ns%G").
const NamespaceSeparator = "%"

// MaxNamespaceLength bounds a namespace; with the separator and a group, the name must still fit the
// broker's 255-character limit on resource names.
const MaxNamespaceLength = 64

// ValidateNamespace returns an error saying why ns cannot be a RocketMQ namespace: it may hold only
// ASCII letters, digits, '-' and '_' (RocketMQ's resource name characters without '%' and '|', because '%'
// separates the namespace from the name), at most MaxNamespaceLength characters. "" (no namespace) is valid.
func ValidateNamespace(ns string) error {
	if len(ns) > MaxNamespaceLength {
		return fmt.Errorf("%d characters, more than %d", len(ns), MaxNamespaceLength)
	}
	for i, r := range ns {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("%q has %q at byte %d: only letters, digits, '-' and '_' are allowed", ns, r, i)
		}
	}
	return nil
}

// InNamespace returns resource as the broker names it in namespace ns: "ns%T" for a topic or group T,
// "%RETRY%ns%G" for "%RETRY%G" and "%DLQ%ns%G" for "%DLQ%G". It returns resource unchanged when ns is ""
// or resource already carries the namespace, so it is safe to apply twice. This is the broker's rule;
// the Go client's own wrapping (utils.WrapNamespace, the producer's and push consumer's prefixing) would
// turn "%DLQ%G" into "ns%%DLQ%G", a topic nobody reads.
func InNamespace(ns, resource string) string {
	if ns == "" || resource == "" {
		return resource
	}
	prefix, name := splitSystemPrefix(resource)
	if strings.HasPrefix(name, ns+NamespaceSeparator) {
		return resource
	}
	return prefix + ns + NamespaceSeparator + name
}

// WithoutNamespace is the inverse of InNamespace: "ns%T" → "T", "%RETRY%ns%G" → "%RETRY%G",
// "%DLQ%ns%G" → "%DLQ%G". A name not in namespace ns is returned unchanged.
func WithoutNamespace(ns, resource string) string {
	if ns == "" {
		return resource
	}
	prefix, name := splitSystemPrefix(resource)
	if rest, ok := strings.CutPrefix(name, ns+NamespaceSeparator); ok {
		return prefix + rest
	}
	return resource
}

// NamespacedDLQTopic returns the dead-letter topic of group in namespace ns as the broker names it:
// "%DLQ%ns%group", or DLQTopic(group) when ns is "".
func NamespacedDLQTopic(ns, group string) string { return DLQTopicPrefix + InNamespace(ns, group) }

// NamespacedRetryTopic returns the retry topic of group in namespace ns as the broker names it:
// "%RETRY%ns%group", or RetryTopic(group) when ns is "".
func NamespacedRetryTopic(ns, group string) string { return RetryTopicPrefix + InNamespace(ns, group) }

// splitSystemPrefix splits "%RETRY%x" and "%DLQ%x" into the prefix and x; other names have no prefix.
func splitSystemPrefix(resource string) (prefix, name string) {
	for _, p := range []string{RetryTopicPrefix, DLQTopicPrefix} {
		if rest, ok := strings.CutPrefix(resource, p); ok {
			return p, rest
		}
	}
	return "", resource
}

// OriginalTopic returns the business topic of msg: the RETRY_TOPIC property when msg sits on a
// %RETRY% or %DLQ% topic and carries one, else msg.Topic. The client restores the topic of retried
// messages itself in most paths; this makes the rule hold for every path.
func OriginalTopic(msg *primitive.MessageExt) string {
	if IsSystemTopic(msg.Topic) {
		if t := msg.GetProperty(primitive.PropertyRetryTopic); t != "" {
			return t
		}
	}
	return msg.Topic
}
