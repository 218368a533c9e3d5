/* state.h -- placeholder: llama.cpp's sequence state parser. */
#ifndef SB_LLAMA_STATE_H
#define SB_LLAMA_STATE_H
#endif
