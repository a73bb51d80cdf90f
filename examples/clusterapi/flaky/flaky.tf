# Added to the cluster example module (examples/modules/cluster) for the `flaky`
# cluster: its apply fails twice, then succeeds, as if a cloud API throttled the
# first two calls. The counter file stands in for that API's memory.

variable "counter_file" {
  type = string
}

resource "terraform_data" "flaky" {
  input = var.counter_file
  provisioner "local-exec" {
    command = <<-SH
      n=$(cat "${var.counter_file}" 2>/dev/null || echo 0)
      echo $((n + 1)) > "${var.counter_file}"
      if [ "$n" -lt 2 ]; then
        echo "simulated cloud API error: throttled (attempt $((n + 1)))" >&2
        exit 1
      fi
    SH
  }
}
