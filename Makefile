# `make run` / `make test` are the same as ./dev.sh run / ./dev.sh test (the documented way:
# a fresh Debian may lack make). Extra arguments: make test ARGS="-x -k softmax".
ARGS ?=

.PHONY: run test

run:
	./dev.sh run $(ARGS)

test:
	./dev.sh test $(ARGS)
