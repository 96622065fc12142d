#!/usr/bin/env bash
# Placeholder until the demo stack lands: a local Varnish 7 and a small PHP
# site on loopback with gearshift in the foreground.
echo "make demo: the local Varnish + PHP demo stack is coming; for now run 'make test'."
