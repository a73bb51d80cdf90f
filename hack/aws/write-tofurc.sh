#!/usr/bin/env bash
# Prints an OpenTofu CLI config that installs hashicorp/local from the mirror at $1
# (hack/tofu's) and hashicorp/aws from the mirror at $2 (absolute paths), and neither
# from the network.
set -euo pipefail
cat <<HCL
provider_installation {
  filesystem_mirror {
    path    = "$1"
    include = ["registry.opentofu.org/hashicorp/local"]
  }
  filesystem_mirror {
    path    = "$2"
    include = ["registry.opentofu.org/hashicorp/aws"]
  }
  direct {
    exclude = ["registry.opentofu.org/hashicorp/local", "registry.opentofu.org/hashicorp/aws"]
  }
}
HCL
