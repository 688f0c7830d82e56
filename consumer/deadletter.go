package consumer

import "github.com/rmqguard/rmqguard/internal/letter"

// origin is what d's dead letter is made of.
func (d *Delivery) origin() letter.Origin {
	return letter.Origin{Msg: d.Msg, Group: d.Group, Topic: d.Topic, Namespace: d.Namespace}
}
