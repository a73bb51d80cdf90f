//go:build tools

// Package tools pins the provider built from this module.
package tools

import _ "github.com/hashicorp/terraform-provider-aws"
