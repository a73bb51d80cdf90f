terraform {
  required_version = ">= 1.6"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.0, < 7.0"
    }
  }
}

# Credentials come from the identity the runner's Job carries (environment variables
# or a web identity token file), never from this module; see docs/modules-aws.md.
provider "aws" {
  region      = var.region
  max_retries = var.max_retries

  dynamic "assume_role" {
    for_each = var.assume_role_arn == null ? [] : [var.assume_role_arn]
    content {
      role_arn     = assume_role.value
      session_name = "captf-${var.captf_object.namespace}-${var.captf_object.name}"
    }
  }
}
