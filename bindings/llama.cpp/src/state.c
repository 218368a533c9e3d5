/* state.c -- placeholder: llama.cpp's sequence state parser. */
#include "state.h"
