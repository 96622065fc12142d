#!/bin/sh
# Writes the environment the hook was given to the file $1.
env >"$1"
