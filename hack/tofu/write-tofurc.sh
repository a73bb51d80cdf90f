#!/usr/bin/env bash
# Prints an OpenTofu CLI config that installs hashicorp/local only from the
# filesystem mirror at $1 (an absolute path), so `tofu init` never reaches the
# network for it. Used by build.sh and by the container build.
set -euo pipefail
mirror="$1"
cat <<HCL
provider_installation {
  filesystem_mirror {
    path    = "$mirror"
    include = ["registry.opentofu.org/hashicorp/local"]
  }
  direct {
    exclude = ["registry.opentofu.org/hashicorp/local"]
  }
}
HCL
