// Command kubelet-config-schema prints how upstream Karpenter's runtime kubelet validation
// decodes an EC2NodeClass's spec.kubelet: the fields of the kubelet's KubeletConfiguration
// (k8s.io/kubelet/config/v1beta1, the version karpenter-provider-aws's go.mod pins) with their
// JSON and Go types, nested structs included. Upstream decodes spec.kubelet strictly into that
// struct (sigs.k8s.io/json UnmarshalStrict), so an unknown field or a wrong type is refused;
// karpenter-api's validation walks this description to do the same.
//
// Regenerate after bumping k8s.io/kubelet in go.mod to the version upstream pins:
//
//	cd scripts/kubelet-config-schema && go run . > ../../crates/karpenter-api/src/validation/kubelet_config_v1beta1.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

var unmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

type node map[string]any

// describe says how encoding/json decodes into t: its JSON type (or one of the special
// decoders), and its Go type for messages.
func describe(t reflect.Type, seen map[reflect.Type]bool) node {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	n := describeType(t, seen)
	n["go"] = t.String()
	return n
}

func describeType(t reflect.Type, seen map[reflect.Type]bool) node {
	if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(unmarshaler) {
		name := t.PkgPath() + "." + t.Name()
		switch name {
		case "k8s.io/apimachinery/pkg/apis/meta/v1.Duration":
			return node{"type": "duration"}
		case "k8s.io/apimachinery/pkg/api/resource.Quantity", "k8s.io/apimachinery/pkg/api/resource.QuantityValue":
			return node{"type": "quantity"}
		case "k8s.io/apimachinery/pkg/apis/meta/v1.Time":
			return node{"type": "time"}
		case "k8s.io/component-base/logs/api/v1.TimeOrMetaDuration":
			return node{"type": "durationOrNanoseconds"}
		default:
			fmt.Fprintln(os.Stderr, "unhandled unmarshaler", name)
			os.Exit(1)
		}
	}
	switch t.Kind() {
	case reflect.String:
		return node{"type": "string"}
	case reflect.Bool:
		return node{"type": "boolean"}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		return node{"type": "integer", "format": fmt.Sprintf("int%d", t.Bits())}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return node{"type": "integer", "format": fmt.Sprintf("uint%d", t.Bits())}
	case reflect.Float32, reflect.Float64:
		return node{"type": "number"}
	case reflect.Slice, reflect.Array:
		return node{"type": "array", "items": describe(t.Elem(), seen)}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			fmt.Fprintln(os.Stderr, "map key", t)
			os.Exit(1)
		}
		return node{"type": "object", "additionalProperties": describe(t.Elem(), seen)}
	case reflect.Interface:
		return node{"type": "any"}
	case reflect.Struct:
		if seen[t] {
			fmt.Fprintln(os.Stderr, "recursive", t)
			os.Exit(1)
		}
		seen[t] = true
		props := node{}
		fields(t, props, seen)
		delete(seen, t)
		return node{"type": "object", "properties": props}
	}
	fmt.Fprintln(os.Stderr, "unhandled kind", t)
	os.Exit(1)
	return nil
}

func fields(t reflect.Type, props node, seen map[reflect.Type]bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				fields(ft, props, seen)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = describe(f.Type, seen)
	}
}

func main() {
	root := describe(reflect.TypeOf(kubeletconfigv1beta1.KubeletConfiguration{}), map[reflect.Type]bool{})
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(out, '\n'))
}
