"""The AWS reference modules (modules/aws) against moto: the fault proxy, moto's server,
and the end-to-end tests that need the AWS provider built (`make aws`)."""
